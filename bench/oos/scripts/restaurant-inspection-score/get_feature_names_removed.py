# idiom: CountVectorizer + SGDRegressor, then top tokens printed with vectorizer.get_feature_names() (removed in scikit-learn 1.2) before saving; intended: crash (AttributeError)
import numpy as np
import pandas as pd
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import SGDRegressor
from scipy import sparse

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

vectorizer = CountVectorizer(min_df=3, binary=True)
X_text = vectorizer.fit_transform(train["business_name"])
X_text_test = vectorizer.transform(test["business_name"])

extra = lambda df: sparse.csr_matrix(np.c_[(df["Year"] - 2010) / 10.0, np.log1p(df["NumberofLocations"]),
                                            df["Weekend"].astype(float)])
X = sparse.hstack([X_text, extra(train)]).tocsr()
X_test = sparse.hstack([X_text_test, extra(test)]).tocsr()

y = train["inspection_score"].values
y_mean = y.mean()
sgd = SGDRegressor(loss="huber", alpha=1e-4, max_iter=50, random_state=0)
sgd.fit(X, y - y_mean)

# which words lower the score the most?
words = vectorizer.get_feature_names()
coefs = sgd.coef_[: len(words)]
for i in np.argsort(coefs)[:10]:
    print(words[i], round(coefs[i], 3))

pd.DataFrame({"id": test["id"], "inspection_score": sgd.predict(X_test) + y_mean}).to_csv("submission.csv", index=False)
