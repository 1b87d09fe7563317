# idiom: stateless HashingVectorizer (char_wb 2-4 grams, alternate_sign=False) with SGDClassifier(loss='log_loss') and a fixed alpha, no vocabulary to fit; intended: valid
import pandas as pd
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.linear_model import SGDClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

hasher = HashingVectorizer(analyzer="char_wb", ngram_range=(2, 4), n_features=2 ** 18, alternate_sign=False)
X = hasher.transform(train["animal_name"].fillna("").str.lower())
X_test = hasher.transform(test["animal_name"].fillna("").str.lower())
y = (train["species"] == "Dog").astype(int)

sgd = SGDClassifier(loss="log_loss", alpha=1e-4, max_iter=30, tol=None, random_state=0)
sgd.fit(X, y)
proba = sgd.predict_proba(X_test)[:, 1]
print("mean P(Dog):", round(proba.mean(), 3), "train share:", round(y.mean(), 3))
pd.DataFrame({"id": test["id"], "species": proba}).to_csv("submission.csv", index=False)
