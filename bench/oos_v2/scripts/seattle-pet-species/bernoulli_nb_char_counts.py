# idiom: CountVectorizer(binary=True, analyzer='char', ngram_range=(1, 3)) on the names with BernoulliNB, probabilities of the 'Dog' column picked through nb.classes_; intended: valid
import numpy as np
import pandas as pd
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.naive_bayes import BernoulliNB

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

vectorizer = CountVectorizer(analyzer="char", ngram_range=(1, 3), binary=True, lowercase=True)
X = vectorizer.fit_transform(train["animal_name"].fillna(""))
X_test = vectorizer.transform(test["animal_name"].fillna(""))
print("character n-grams:", X.shape[1])

nb = BernoulliNB(alpha=1.0)
nb.fit(X, train["species"])
p_dog = nb.predict_proba(X_test)[:, np.flatnonzero(nb.classes_ == "Dog")[0]]
pd.DataFrame({"id": test["id"], "species": p_dog}).to_csv("submission.csv", index=False)
